-- One view per stage table over its Parquet files. The warehouse fills in {table}, {source} (the glob of
-- its files, quoted, or the list of those that read while one is damaged) and
-- {columns} (every column of the record type, typed, so that files written before a column was
-- added still read, with NULL there); the run id comes from the hive partition
-- (tables/<table>/run_id=<run>/...), so filtering on run_id reads only that run's files.
CREATE OR REPLACE VIEW {table} AS
SELECT run_id, * EXCLUDE (run_id, _written_at) FROM (
    SELECT * FROM read_parquet({source}, hive_partitioning = true, union_by_name = true,
                               hive_types = {{'run_id': 'VARCHAR'}})
    UNION ALL BY NAME
    SELECT {columns}, CAST(NULL AS TIMESTAMPTZ) AS _written_at WHERE false
);
