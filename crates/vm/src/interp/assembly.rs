//! What a turn's program offers, told before the turn's first step.
//!
//! Every turn opens by reporting, from the compiled program alone, what its workflow is
//! assembled from: `interpreter-enabled` when some state lets the model run code,
//! `skills-loaded` with the skill bundles its states enable, `graph-topology` with its
//! states and edges, and `prompt-shaping` with how prompts are cached per model and which
//! built-in tools no state is handed. A reader of one turn's events (a `--events` file,
//! the runner's stream) therefore needs nothing else to interpret them; a sub-workflow's
//! turn reports its own workflow, under its dispatch id.

use std::collections::BTreeSet;

use archmax_program::program::StateKind;
use archmax_program::tools::{DEFAULT_TOOLS, Tool, UNGRANTABLE_TOOL};

use crate::events::{CacheShaping, Event, ModelCache};
use crate::model::PromptCache;

use super::Turn;

impl Turn<'_> {
    /// Emits the assembly events of this turn's workflow.
    pub(super) fn announce(&self) {
        let program = self.program();
        let workflow = self.workflow;
        let offered: BTreeSet<&str> = workflow
            .surfaces
            .iter()
            .flat_map(|surface| surface.tools.iter().map(|tool| program.str(tool.name)))
            .collect();
        if offered.contains(Tool::Eval.name()) || offered.contains(Tool::Run.name()) {
            self.emit(Event::InterpreterEnabled {});
        }
        let skills: BTreeSet<&str> =
            workflow.states.iter().flat_map(|state| state.skills.iter().map(|skill| program.str(*skill))).collect();
        if !skills.is_empty() {
            self.emit(Event::SkillsLoaded { names: skills.into_iter().map(str::to_string).collect() });
        }
        self.emit(Event::GraphTopology { topology: archmax_program::topology::topology(program, workflow) });
        let withheld = DEFAULT_TOOLS
            .iter()
            .copied()
            .filter(|tool| !offered.contains(tool))
            .chain([UNGRANTABLE_TOOL])
            .map(str::to_string)
            .collect();
        self.emit(Event::PromptShaping { cache: self.cache_shaping(), withheld });
    }

    /// Caching as the adapter would mark the calls of each model the workflow's agent,
    /// human and grader states run (all under the workflow's `settings.prompt_cache`).
    fn cache_shaping(&self) -> CacheShaping {
        let program = self.program();
        let settings = &self.workflow.settings;
        let cache = PromptCache::declared(program, self.workflow);
        let mut models: Vec<Option<&str>> = vec![settings.model.map(|model| program.str(model))];
        for state in &self.workflow.states {
            let model = state.model.map(|model| program.str(model));
            if matches!(state.kind, StateKind::Agent | StateKind::Human | StateKind::Grader) && !models.contains(&model)
            {
                models.push(model);
            }
        }
        let plans: Vec<_> =
            models.into_iter().map(|model| (model, self.runtime.model().cache_plan(model, cache))).collect();
        let first = plans.first().map(|(_, plan)| plan);
        CacheShaping {
            enabled: first.is_some_and(|plan| plan.enabled),
            ttl: first.and_then(|plan| plan.ttl.clone()),
            models: plans
                .iter()
                .map(|(model, plan)| ModelCache {
                    model: model.map(str::to_string),
                    strategy: plan.strategy.to_string(),
                })
                .collect(),
        }
    }
}
