-- pyprof_bias(call; family): PyProf's 'bias' rule, a condition: a kernel of a linear call
-- (torch.nn.functional.linear) whose costed call is no matrix product is the linear's bias add.
-- {call}: the alias of the linear call's range (its name and module); {family}: the kernel's op
-- family. Used where the kernel's PyProf role is chosen (schemas/derive/kernel_op.sql) and where
-- its op is named (queries/kernel_op.sql), so that both say 'bias' of the same kernels.
{call}.name = 'linear' AND {call}.module = 'torch.nn.functional' AND {family} <> 'matmul'
