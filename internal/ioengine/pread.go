package ioengine

// startPread starts QueueDepth goroutines that each run one blocking pread
// at a time, so that QueueDepth reads are in flight as with io_uring.
func (e *Engine) startPread() {
	e.wg.Add(e.depth)
	for range e.depth {
		go e.preadWorker()
	}
}

func (e *Engine) preadWorker() {
	defer e.wg.Done()
	for {
		o := e.q.pop(true)
		if o == nil {
			return
		}
		if err := o.batch.ctx.Err(); err != nil {
			e.finish(o, o.errorAt(err))
			continue
		}
		e.finish(o, e.pread(o))
	}
}

// pread reads o to the end with the same rules as the io_uring backend.
func (e *Engine) pread(o *op) error {
	for {
		off, dst := o.next()
		e.st.submissions.Add(1)
		again, err := e.advance(o, preadAt(o.f.fd, dst, off), "pread")
		if !again {
			return err
		}
	}
}
