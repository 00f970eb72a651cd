package bundle

// DecodeShardBothWays decodes a release shard's bytes as decodeShardRendered
// does (ok: it read them) and as decodeStrict does, for the tests that hold
// the first to the second.
func DecodeShardBothWays(b []byte) (rendered any, ok bool, strict any, err error) {
	fast, ok := decodeShardRendered(b)
	var sd shardDoc
	_, err = decodeStrict("shard.yaml", b, &sd)
	return fast, ok, sd, err
}
