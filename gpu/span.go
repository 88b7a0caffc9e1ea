package gpu

// Span is a run of float32 values on the device: from float offset Off of
// Buf. The operations' shapes say how many values they read or write.
type Span struct {
	Buf *Buffer
	Off int
}

// At is the span n floats further on.
func (s Span) At(n int) Span { return Span{s.Buf, s.Off + n} }
