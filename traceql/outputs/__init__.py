"""Layer 6, outputs: text for people (render), Perfetto timelines, Parquet exports, plots."""
