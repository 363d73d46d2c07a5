-- version.lua: the library version.

-- ff_version: the version of the loaded library; the store reloads the
-- library when it differs from its own.
-- KEYS: none. ARGV: none.
-- Reply: the version string (LIBRARY_VERSION, set by lua.go from a hash of
-- the library's source).
local function ff_version()
  return LIBRARY_VERSION
end

register('ff_version', ff_version, {'no-writes'})
