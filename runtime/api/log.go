package api

// Attribute keys of the structured logs written by this package.
const (
	attrMethod   = "method"
	attrPath     = "path"
	attrStatus   = "status"
	attrCode     = "code"
	attrError    = "error"
	attrDuration = "duration"
	attrRemote   = "remote"
	// attrForwardedFor is the X-Forwarded-For header of a request, as
	// its client sent it.
	attrForwardedFor = "forwarded_for"
)
