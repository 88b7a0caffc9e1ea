package engine

// layerState is what one layer keeps of a session's sequence, on the
// model's backend: the keys and values of a full-attention layer (MLA's
// latents in k alone), or the recurrent state of a linear-attention one,
// made on the layer's first token (fresh: by the step under way).
type layerState struct {
	k, v  KVStore
	rec   RecurrentStore
	fresh bool
}

// copyOf makes st a copy of src's first n positions (and its recurrent
// state), in stores of their exact size.
func (st *layerState) copyOf(src *layerState, n int) error {
	var err error
	if st.k, err = src.k.Clone(n); err != nil {
		return err
	}
	if st.v, err = src.v.Clone(n); err != nil {
		return err
	}
	if src.rec != nil {
		st.rec, err = src.rec.Clone()
	}
	return err
}

// free returns the layer's state.
func (st *layerState) free() {
	if st.k != nil {
		st.k.Free()
	}
	if st.v != nil {
		st.v.Free()
	}
	if st.rec != nil {
		st.rec.Free()
		st.rec = nil
	}
}

// bytes is the memory the layer's state holds.
func (st *layerState) bytes() int64 {
	n := st.k.Bytes() + st.v.Bytes()
	if st.rec != nil {
		n += st.rec.Bytes()
	}
	return n
}

// recurrentState returns layer il's recurrent state, making it (zeroed)
// on first use.
func (s *Session) recurrentState(il, conv, ssm int) (RecurrentStore, error) {
	st := &s.state[il]
	if st.rec == nil {
		r, err := s.be.NewRecurrent(conv, ssm)
		if err != nil {
			return nil, err
		}
		st.rec, st.fresh = r, true
	}
	return st.rec, nil
}

// recurrent is the CPU backend's RecurrentStore: the convolution's last
// inputs and each head's state matrix outside the Go heap, with the copy
// that undoes a step that failed part way.
type recurrent struct {
	mem         *offHeap
	conv, ssm   []float32 // views of mem
	convT, ssmT Tensor    // the same, as tensors
	saved       *offHeap  // the state as the step under way found it
}

// alloc makes the state, zeroed.
func (r *recurrent) alloc(convN, ssmN int) error {
	mem, err := newOffHeap(4 * (convN + ssmN))
	if err != nil {
		return err
	}
	r.set(mem, convN)
	return nil
}

func (r *recurrent) set(mem *offHeap, convN int) {
	f := mem.floats()
	r.mem, r.conv, r.ssm = mem, f[:convN:convN], f[convN:]
	buf := &tbuf{host: f}
	r.convT, r.ssmT = Tensor{buf: buf, n: convN}, Tensor{buf: buf, off: convN, n: len(f) - convN}
}

// begin saves the state before a step changes it.
func (r *recurrent) begin() error {
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

// abort puts back the state begin saved.
func (r *recurrent) abort() {
	if r.mem != nil && r.saved != nil {
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
	var c recurrent
	c.set(mem, len(r.conv))
	return c, nil
}

// beginStep readies every layer's state for a step: the recurrent states
// are saved, so that abortStep can undo what the step changes.
func (s *Session) beginStep() error {
	for i := range s.state {
		st := &s.state[i]
		st.fresh = false
		if st.rec != nil {
			if err := st.rec.Save(); err != nil {
				return err
			}
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
		st.k.Truncate(s.n)
		st.v.Truncate(s.n)
		switch {
		case st.fresh:
			st.rec.Free()
			st.rec, st.fresh = nil, false
		case st.rec != nil:
			st.rec.Restore()
		}
	}
}

// Close frees the session's state now, instead of when it is no longer
// reachable; the session may not be used afterwards.
func (s *Session) Close() {
	for i := range s.state {
		s.state[i].free()
	}
	if s.ar != nil {
		s.ar.Free()
		s.ar = nil
	}
}

// StateBytes is the memory the session's state holds: its KV cache (of
// the positions held, by its type) and recurrent state.
func (s *Session) StateBytes() int64 {
	var n int64
	for i := range s.state {
		n += s.state[i].bytes()
	}
	return n
}
