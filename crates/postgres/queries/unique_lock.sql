-- Serializes the enqueues of one unique key until the transaction ends:
-- the second looks for a stand-in only after the first has committed (or
-- rolled back), so two never both find none.
SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7266140))
