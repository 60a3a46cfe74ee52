"""Layer 1, core: errors, faults, settings, text and name matching, progress, the SQL files shipped
with the package, Arrow results. Imports nothing else of traceql."""
