"""Layer 7, analysis: analyze's rules, diff with its statistics and text."""
