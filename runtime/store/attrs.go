package store

// Log attribute keys.
const (
	attrServer         = "server"
	attrLibraryVersion = "library_version"
	attrLoadedVersion  = "loaded_version"
	attrFlowPartitions = "flow_partitions"
	attrFunction       = "function"
	attrNode           = "node"
)

const (
	attrError     = "error"
	attrExecution = "execution"
	attrEntry     = "entry"
)
