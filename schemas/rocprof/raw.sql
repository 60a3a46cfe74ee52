-- The rocprof (v1) source tables the rocprof adapters read (`rocprof --hip-trace --hsa-trace -o
-- results.csv` writes results.db beside its CSVs). HIP: one row per HIP API call; OPS: kernel
-- dispatches; COPY: memory copies. Index is rocprof's correlation id: a kernel's or copy's Index is
-- that of the HIP call that enqueued it. BeginNs/EndNs are host-clock ns. dev-id is the HSA agent
-- index (CPU agents counted first: on a two-socket host the first GPU is 2), queue-id the HSA queue,
-- stream-id the HIP stream.
CREATE TABLE HIP (BeginNs BIGINT, EndNs BIGINT, pid BIGINT, tid BIGINT, Name VARCHAR, args VARCHAR, "Index" BIGINT);

CREATE TABLE OPS (
    BeginNs BIGINT, EndNs BIGINT, "dev-id" BIGINT, "queue-id" BIGINT, Name VARCHAR, pid BIGINT, tid BIGINT,
    "stream-id" BIGINT, "Index" BIGINT
);

CREATE TABLE COPY (
    BeginNs BIGINT, EndNs BIGINT, "dev-id" BIGINT, "queue-id" BIGINT, Name VARCHAR, pid BIGINT, tid BIGINT,
    "stream-id" BIGINT, "Index" BIGINT
);
