// The task every benchmark job runs: nothing, like Errand's no-op handler.
module.exports = async () => {};
