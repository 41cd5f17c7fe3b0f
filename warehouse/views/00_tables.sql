-- One view per stage table over its Parquet files. The warehouse fills in {table} and {glob}
-- for each table in hifirag_core/records.py; the run id comes from the hive partition
-- (tables/<table>/run_id=<run>/...), so filtering on run_id reads only that run's files.
CREATE OR REPLACE VIEW {table} AS
SELECT run_id, * EXCLUDE (run_id, _written_at)
FROM read_parquet('{glob}', hive_partitioning = true, union_by_name = true,
                  hive_types = {{'run_id': 'VARCHAR'}});
