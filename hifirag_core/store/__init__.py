"""Where results are kept: the warehouse (one writer, DuckDB views), content-addressed page bytes
(``blobs``), each URL's last good fetch (``page_cache``), and the read-only queries the CLI asks."""
