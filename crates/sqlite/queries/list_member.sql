-- One member of list.sql (whose comment explains the listing), built by
-- reads.rs: the jobs in one state (the state's name stands for the
-- placeholder `state`, the table or index read for `source`, the listing
-- index's condition for `partial`) in one range of places (`range`).
-- Comment lines are left out of the statement.
SELECT * FROM (
    SELECT rowid AS seq, created_at FROM $source
    WHERE state = '$state'$partial AND coalesce(:state, '$state') = '$state'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND $range
    ORDER BY created_at, rowid
    LIMIT :limit)
