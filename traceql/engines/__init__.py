"""Layer 8, engines: the query library on Apache Spark (transpile to Spark SQL, the session)."""
