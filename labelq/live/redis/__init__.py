"""The live engine's Redis storage: key names and field encodings (:mod:`.keys`), the Lua
scripts with typed results (:mod:`.scripts`), the script wire client (:mod:`.wire`) and a
token lock (:mod:`.lock`). Nothing here knows SQL or the policies."""
