// Suite configuration (contract 2).
export default {
  maxConcurrency: 1,
  caseTimeoutMs: 120000,
  judge: {},
};
