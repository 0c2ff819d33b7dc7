-- Dead jobs by queue, for the statistics: each queue's dead count reads
-- this queue's range (at most the cap) instead of sampling every queue's
-- dead jobs together. Partial, so only a job that dies adds an entry.
CREATE INDEX errand_jobs_dead_by_queue
    ON errand_jobs (queue, finished_at)
    WHERE state = 'dead';
