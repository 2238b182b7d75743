//! A generated workflow of any size, shared by the benches.
//!
//! Each state is realistic: instructions, two described transitions, a guarded tool
//! entry, `requires`; every tenth state is a human review, every seventh a code state
//! running `scripts/check.js`, so every check and every lowering step does real work.

/// The script every generated code state runs.
pub const SCRIPT: &str = "/** Check */\nexport default async function ({ tools }) {\n  await tools.archmax_advance({ to: \"x\", reason: \"ok\" });\n}\n";

/// The `workflow.yaml` text of a generated workflow with `states` states.
pub fn workflow(states: usize) -> String {
    let mut text = String::from(
        "title: Generated\ninstructions: |-\n  Work carefully.\nsettings: { model: gpt-5-mini }\n\
         skills: { allow_always: [] }\nmounts: { allow_always: [] }\nstates:\n",
    );
    for index in 0..states {
        let next = (index + 1).min(states - 1);
        let skip = (index + 2).min(states - 1);
        text.push_str(&format!("  s{index}:\n"));
        if index == 0 {
            text.push_str(
                "    triggers:\n      manual:\n        requires:\n          - { name: order_id, type: string, pattern: \"^ORD-[0-9]+$\" }\n",
            );
        }
        if index % 10 == 5 && index + 1 < states {
            text.push_str(&format!(
                "    type: human\n    instructions: Approve step {index}.\n    transitions:\n\
                 \x20     - {{ to: s{next}, type: approve, description: The step is right. }}\n\
                 \x20     - {{ to: s{}, type: refine, description: The step needs work. }}\n",
                index - 1
            ));
            continue;
        }
        if index % 7 == 3 && index + 1 < states {
            text.push_str(&format!(
                "    type: code\n    script: scripts/check.js\n    on_error: s{}\n    transitions:\n\
                 \x20     - {{ to: s{next}, description: The check passes. }}\n",
                states - 1
            ));
            continue;
        }
        text.push_str(&format!("    instructions: Do step {index} for the order.\n"));
        text.push_str(&format!(
            "    tools:\n      allow:\n        - {{ tool: write_file, paths: [\"reports/${{{{order_id}}}}/s{index}/*.md\"] }}\n"
        ));
        text.push_str(&format!("    requires: [v{index}]\n"));
        if index + 1 < states {
            text.push_str(&format!(
                "    transitions:\n      - {{ to: s{next}, description: Step {index} is done. }}\n\
                 \x20     - {{ to: s{skip}, description: Step {index} is not needed. }}\n"
            ));
        }
    }
    text
}
