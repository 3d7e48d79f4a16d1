package redisrules

import "errors"

// Sentinel errors. Content that does not make valid rules is reported with
// errors wrapping graylb.ErrInvalidRules. Test with errors.Is.
var (
	// ErrRedis is wrapped by every error that comes from talking to Redis
	// rather than from what it holds: the server is down or unreachable, a
	// round trip timed out, the credentials were refused.
	ErrRedis = errors.New("redisrules: redis unavailable")
	// ErrInvalidOption: a nil client, two layouts, a bad key name.
	ErrInvalidOption = errors.New("redisrules: invalid option")
)
