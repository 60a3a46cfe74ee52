-- The kernel symbols whose short names traceql.adapters derives: rocpd records the demangled name
-- (display_name) beside the symbol, so the display name is used as is (a name that is not mangled
-- stays as stored) and only short_name is new.
SELECT id, display_name FROM raw.rocpd_info_kernel_symbol
