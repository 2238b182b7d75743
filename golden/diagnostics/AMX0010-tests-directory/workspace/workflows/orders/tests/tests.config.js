module.exports = { maxConcurrency: 1 };
