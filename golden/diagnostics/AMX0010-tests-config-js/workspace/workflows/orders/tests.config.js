export default { maxConcurrency: 1 };
