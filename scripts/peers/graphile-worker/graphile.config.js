// The configuration graphile-worker's own performance test uses: each
// process runs GW_CONCURRENCY jobs at once, fetches up to 500 jobs ahead
// into a local queue and completes jobs in batches without delay.
const concurrency = Number(process.env.GW_CONCURRENCY || 24);
module.exports = {
  worker: {
    connectionString: process.env.DATABASE_URL,
    concurrentJobs: concurrency,
    maxPoolSize: concurrency + 1,
    fileExtensions: [".js"],
    localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};
