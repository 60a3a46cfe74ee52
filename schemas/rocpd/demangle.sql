-- The kernel symbols whose short names traceql.adapters derives: rocpd records the demangled name
-- (display_name) beside the symbol, so the display name is used as is (a name that is not mangled
-- stays as stored) and only short_name is new. Only symbols that a dispatch runs: a PyTorch
-- process loads thousands of kernels it never launches (9,889 symbols, 80 of them dispatched, in the
-- rocprofv3 JSON at hand), and each symbol costs a Python demangle.
SELECT id, display_name FROM raw.rocpd_info_kernel_symbol
WHERE id IN (SELECT kernel_id FROM raw.rocpd_kernel_dispatch)
