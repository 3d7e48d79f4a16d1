package redisrules

import (
	"context"
	"fmt"
	"strconv"

	"github.com/graylb/graylb"
	"github.com/redis/go-redis/v9"
)

// document is the layout of one key holding a JSON rule document.
type document struct {
	key string
}

func (l *document) keys() []string { return []string{l.key} }

func (l *document) describe() string { return "document " + l.key }

// eventClasses: string commands ($), generic ones such as DEL and RENAME
// (g), expiry (x).
func (l *document) eventClasses() string { return "$gx" }

func (l *document) queue(p redis.Pipeliner, _ int) func() (content, error) {
	ctx := context.Background() // the pipeline's Exec carries the context
	exists := p.Exists(ctx, l.key)
	strlen := p.StrLen(ctx, l.key)
	// At most one byte more than allowed: a huge value is never transferred.
	data := p.GetRange(ctx, l.key, 0, graylb.MaxRulesSize)
	return func() (content, error) {
		var c content
		sum := newSummer("document")
		for _, err := range []error{exists.Err(), strlen.Err(), data.Err()} {
			cerr, rerr := replyErr(l.key, err)
			if rerr != nil {
				return content{}, rerr
			}
			if cerr != nil {
				sum.add("wrong type")
				c.sum, c.err = sum.sum(), cerr
				return c, nil
			}
		}
		sum.add(strconv.FormatInt(exists.Val(), 10))
		sum.add(strconv.FormatInt(strlen.Val(), 10))
		sum.add(data.Val())
		c.sum = sum.sum()
		switch {
		case exists.Val() == 0:
			c.missing = true
		case strlen.Val() > graylb.MaxRulesSize:
			c.err = fmt.Errorf("%w: redisrules: key %q holds a document of %d bytes, at most %d",
				graylb.ErrInvalidRules, l.key, strlen.Val(), graylb.MaxRulesSize)
		default:
			r, err := graylb.ParseRules([]byte(data.Val()))
			if err != nil {
				c.err = fmt.Errorf("redisrules: key %q: %w", l.key, err)
			}
			c.rules = r
		}
		return c, nil
	}
}
