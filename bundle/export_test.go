package bundle

// DecodeShardBothWays decodes a release shard's bytes as decodeShardRendered
// does (ok: it read them) and as decodeStrict does, for the tests that hold
// the first to the second.
func DecodeShardBothWays(b []byte) (rendered any, ok bool, strict any, err error) {
	fast, ok := decodeShardRendered(b)
	sd, err := decodeShardStrict(b)
	return fast, ok, sd, err
}

// DecodeShardRendered is decodeShardRendered, for its benchmark.
var DecodeShardRendered = decodeShardRendered

// DecodeShardStrict decodes a release shard's bytes as decodeStrict does.
func DecodeShardStrict(b []byte) error {
	_, err := decodeShardStrict(b)
	return err
}

func decodeShardStrict(b []byte) (shardDoc, error) {
	var sd shardDoc
	_, err := decodeStrict("shard.yaml", b, &sd)
	return sd, err
}
