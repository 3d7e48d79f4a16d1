package adapter

// Done ends the call as OK when ok, else as Failed (see End).
func (c Call) Done(ok bool) { c.End(Answer(!ok)) }

// TimedOut ends a call whose caller's deadline passed: as
// DeadlineAnswered when answered, else as DeadlineNoAnswer (see End).
func (c Call) TimedOut(answered bool) {
	if answered {
		c.End(DeadlineAnswered)
		return
	}
	c.End(DeadlineNoAnswer)
}

// Discard ends the call as Cancelled (see End).
func (c Call) Discard() { c.End(Cancelled) }
