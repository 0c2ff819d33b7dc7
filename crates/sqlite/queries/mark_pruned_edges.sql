-- The edges out of pruned done jobs (:ids, a JSON array): met by their
-- source's state alone while it existed (release.sql), they are marked so
-- that they still read as met once it is gone.
UPDATE errand_dependencies SET met = 1
WHERE depends_on IN (SELECT value FROM json_each(:ids)) AND met = 0
