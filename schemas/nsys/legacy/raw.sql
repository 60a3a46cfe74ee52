-- Source tables only pre-2022 exports have, read in addition to schemas/nsys/raw.sql.
-- TARGET_INFO_CUDA_GPU describes the CUDA GPUs (the short TARGET_INFO_GPU of these files does not).
CREATE TABLE TARGET_INFO_CUDA_GPU (
    deviceId BIGINT, name VARCHAR, pciBusId VARCHAR, globalMemoryBandwidth BIGINT,
    globalMemorySize BIGINT, l2CacheSize BIGINT, coreClockRate BIGINT, numMultiprocessors BIGINT,
    computeCapabilityMajor BIGINT, computeCapabilityMinor BIGINT
);

