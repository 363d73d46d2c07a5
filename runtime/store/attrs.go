package store

// Log attribute keys.
const (
	attrServer         = "server"
	attrLibrary        = "library"
	attrIdleFor        = "idle_for"
	attrFlowPartitions = "flow_partitions"
	attrFunction       = "function"
	attrNode           = "node"
	attrBudgets        = "budgets"
	attrQuotas         = "quotas"
	attrDone           = "done"
	attrTook           = "took"
)

const (
	attrError     = "error"
	attrExecution = "execution"
	attrEntry     = "entry"
)
