package engine

// layerState is what one layer keeps of a session's sequence: the keys
// and values of a full-attention layer (MLA's latents in k alone), or the
// recurrent state of a linear-attention one. Both live outside the Go
// heap (offHeap) and are freed with the session.
type layerState struct {
	k, v kvRows
	rec  recurrent
}

// recurrent is a linear-attention layer's state: the convolution's last
// inputs and each head's state matrix, of fixed sizes, allocated on the
// layer's first token. A step that fails part way is undone from the
// copy begin saved.
type recurrent struct {
	mem       *offHeap
	conv, ssm []float32 // views of mem
	saved     *offHeap  // the state as the step under way found it
	fresh     bool      // the step under way allocated the state
}

// alloc makes the state, zeroed, on first use; later calls return it.
func (r *recurrent) alloc(convN, ssmN int) error {
	if r.mem != nil {
		return nil
	}
	mem, err := newOffHeap(4 * (convN + ssmN))
	if err != nil {
		return err
	}
	f := mem.floats()
	r.mem, r.conv, r.ssm, r.fresh = mem, f[:convN:convN], f[convN:], true
	return nil
}

// begin saves the state before a step changes it.
func (r *recurrent) begin() error {
	r.fresh = false
	if r.mem == nil {
		return nil
	}
	if r.saved == nil {
		saved, err := newOffHeap(len(r.mem.b))
		if err != nil {
			return err
		}
		r.saved = saved
	}
	copy(r.saved.b, r.mem.b)
	return nil
}

// abort puts back the state begin saved, or drops one the step made.
func (r *recurrent) abort() {
	switch {
	case r.fresh:
		r.free()
	case r.mem != nil && r.saved != nil:
		copy(r.mem.b, r.saved.b)
	}
}

func (r *recurrent) free() {
	r.mem.free()
	r.saved.free()
	*r = recurrent{}
}

func (r *recurrent) bytes() int64 {
	var n int64
	if r.mem != nil {
		n += int64(len(r.mem.b))
	}
	if r.saved != nil {
		n += int64(len(r.saved.b))
	}
	return n
}

// clone copies the state (not the saved copy).
func (r *recurrent) clone() (recurrent, error) {
	if r.mem == nil {
		return recurrent{}, nil
	}
	mem, err := newOffHeap(len(r.mem.b))
	if err != nil {
		return recurrent{}, err
	}
	copy(mem.b, r.mem.b)
	f := mem.floats()
	convN := len(r.conv)
	return recurrent{mem: mem, conv: f[:convN:convN], ssm: f[convN:]}, nil
}

// beginStep readies every layer's state for a step: the recurrent states
// are saved, so that abortStep can undo what the step changes.
func (s *Session) beginStep() error {
	for i := range s.state {
		if err := s.state[i].rec.begin(); err != nil {
			return err
		}
	}
	return nil
}

// abortStep undoes a step that did not complete (an error, a
// cancellation): the keys and values it appended are dropped and the
// recurrent states are put back, so the session is as it was at its last
// complete position and the next step continues from there, bit for bit
// as if the failed one had never run.
func (s *Session) abortStep() {
	for i := range s.state {
		st := &s.state[i]
		st.k.truncate(s.n)
		st.v.truncate(s.n)
		st.rec.abort()
	}
}

// Close frees the session's state now, instead of when it is no longer
// reachable; the session may not be used afterwards.
func (s *Session) Close() {
	for i := range s.state {
		st := &s.state[i]
		st.k.free()
		st.v.free()
		st.rec.free()
	}
}

// StateBytes is the memory the session's state holds: its KV cache (of
// the positions held, by its type) and recurrent state.
func (s *Session) StateBytes() int64 {
	var n int64
	for i := range s.state {
		st := &s.state[i]
		n += st.k.bytes() + st.v.bytes() + st.rec.bytes()
	}
	return n
}
