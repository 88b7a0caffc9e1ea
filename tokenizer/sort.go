package tokenizer

// introsort is libstdc++'s std::sort (bits/stl_algo.h, stl_heap.h), step
// for step. std::sort is not stable, and llama.cpp sorts its special
// tokens with it by length alone, so the order of equal-length tokens,
// which decides between overlapping matches in the text, is whatever this
// algorithm leaves. less must be a strict weak order.
func introsort(a []int, less func(x, y int) bool) {
	if len(a) < 2 {
		return
	}
	lg := 0 // std::__lg: floor(log2(len))
	for n := len(a); n > 1; n >>= 1 {
		lg++
	}
	introsortLoop(a, 0, len(a), 2*lg, less)
	introFinalInsertion(a, 0, len(a), less)
}

// introThreshold is _S_threshold: ranges this short are left to the final
// insertion sort.
const introThreshold = 16

func introsortLoop(a []int, first, last, depth int, less func(x, y int) bool) {
	for last-first > introThreshold {
		if depth == 0 {
			introHeapSort(a, first, last, less)
			return
		}
		depth--
		cut := introPartition(a, first, last, less)
		introsortLoop(a, cut, last, depth, less)
		last = cut
	}
}

// introPartition moves the median of a[first+1], a[mid], a[last-1] to
// a[first] and partitions the rest around it.
func introPartition(a []int, first, last int, less func(x, y int) bool) int {
	mid := first + (last-first)/2
	x, y, z := first+1, mid, last-1
	var m int
	switch {
	case less(a[x], a[y]):
		switch {
		case less(a[y], a[z]):
			m = y
		case less(a[x], a[z]):
			m = z
		default:
			m = x
		}
	case less(a[x], a[z]):
		m = x
	case less(a[y], a[z]):
		m = z
	default:
		m = y
	}
	a[first], a[m] = a[m], a[first]

	lo, hi, pivot := first+1, last, first
	for {
		for less(a[lo], a[pivot]) {
			lo++
		}
		hi--
		for less(a[pivot], a[hi]) {
			hi--
		}
		if lo >= hi {
			return lo
		}
		a[lo], a[hi] = a[hi], a[lo]
		lo++
	}
}

func introFinalInsertion(a []int, first, last int, less func(x, y int) bool) {
	if last-first <= introThreshold {
		introInsertion(a, first, last, less)
		return
	}
	introInsertion(a, first, first+introThreshold, less)
	for i := first + introThreshold; i < last; i++ {
		introLinearInsert(a, i, less)
	}
}

func introInsertion(a []int, first, last int, less func(x, y int) bool) {
	for i := first + 1; i < last; i++ {
		if less(a[i], a[first]) {
			v := a[i]
			copy(a[first+1:i+1], a[first:i])
			a[first] = v
		} else {
			introLinearInsert(a, i, less)
		}
	}
}

// introLinearInsert moves a[i] left past every larger element; something not
// larger is known to lie to its left.
func introLinearInsert(a []int, i int, less func(x, y int) bool) {
	v := a[i]
	for less(v, a[i-1]) {
		a[i] = a[i-1]
		i--
	}
	a[i] = v
}

// introHeapSort is std::__partial_sort over the whole range: make_heap, then
// sort_heap.
func introHeapSort(a []int, first, last int, less func(x, y int) bool) {
	n := last - first
	if n < 2 {
		return
	}
	for parent := (n - 2) / 2; ; parent-- {
		introAdjustHeap(a, first, parent, n, a[first+parent], less)
		if parent == 0 {
			break
		}
	}
	for ; n > 1; n-- {
		v := a[first+n-1]
		a[first+n-1] = a[first]
		introAdjustHeap(a, first, 0, n-1, v, less)
	}
}

// introAdjustHeap is std::__adjust_heap: sift the hole at hole down to a leaf,
// then push v up from there.
func introAdjustHeap(a []int, first, hole, n, v int, less func(x, y int) bool) {
	top, child := hole, hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(a[first+child], a[first+child-1]) {
			child--
		}
		a[first+hole] = a[first+child]
		hole = child
	}
	if n&1 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		a[first+hole] = a[first+child-1]
		hole = child - 1
	}
	parent := (hole - 1) / 2
	for hole > top && less(a[first+parent], v) {
		a[first+hole] = a[first+parent]
		hole = parent
		parent = (hole - 1) / 2
	}
	a[first+hole] = v
}
