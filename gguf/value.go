package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types (ggml/include/gguf.h).
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12

	valueTypeCount = 13
)

var valueTypeNames = [valueTypeCount]string{
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
}

func (t ValueType) String() string {
	if t < valueTypeCount {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of one scalar of type t; strings report the
// minimum (the 8-byte length prefix).
func (t ValueType) size() int64 {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64, ValueString:
		return 8
	}
	return 0
}

// Value is one metadata value: a scalar, a string, or an array of scalars
// or strings. The zero Value is invalid.
type Value struct {
	typ  ValueType
	elem ValueType // element type when typ == ValueArray
	v    any       // the Go value: uint8…float64, bool, string, or a slice of one of them
}

// Scalar constructors.
func Uint8(v uint8) Value     { return Value{typ: ValueUint8, v: v} }
func Int8(v int8) Value       { return Value{typ: ValueInt8, v: v} }
func Uint16(v uint16) Value   { return Value{typ: ValueUint16, v: v} }
func Int16(v int16) Value     { return Value{typ: ValueInt16, v: v} }
func Uint32(v uint32) Value   { return Value{typ: ValueUint32, v: v} }
func Int32(v int32) Value     { return Value{typ: ValueInt32, v: v} }
func Float32(v float32) Value { return Value{typ: ValueFloat32, v: v} }
func Bool(v bool) Value       { return Value{typ: ValueBool, v: v} }
func String(v string) Value   { return Value{typ: ValueString, v: v} }
func Uint64(v uint64) Value   { return Value{typ: ValueUint64, v: v} }
func Int64(v int64) Value     { return Value{typ: ValueInt64, v: v} }
func Float64(v float64) Value { return Value{typ: ValueFloat64, v: v} }

// ArrayElem is the set of Go types an array value can hold.
type ArrayElem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | uint64 | int64 | float64
}

// Array makes an array value; the element type follows from T.
func Array[T ArrayElem](v []T) Value {
	var elem ValueType
	switch any(v).(type) {
	case []uint8:
		elem = ValueUint8
	case []int8:
		elem = ValueInt8
	case []uint16:
		elem = ValueUint16
	case []int16:
		elem = ValueInt16
	case []uint32:
		elem = ValueUint32
	case []int32:
		elem = ValueInt32
	case []float32:
		elem = ValueFloat32
	case []bool:
		elem = ValueBool
	case []string:
		elem = ValueString
	case []uint64:
		elem = ValueUint64
	case []int64:
		elem = ValueInt64
	case []float64:
		elem = ValueFloat64
	}
	return Value{typ: ValueArray, elem: elem, v: v}
}

// Type is the value's type tag (ValueArray for arrays).
func (v Value) Type() ValueType { return v.typ }

// ElemType is an array's element type.
func (v Value) ElemType() ValueType { return v.elem }

// Interface returns the Go value: a scalar (uint8…float64, bool, string)
// or, for an array, a slice of the element type.
func (v Value) Interface() any { return v.v }

// Len is an array's element count, or 1 for a scalar.
func (v Value) Len() int {
	if v.typ != ValueArray {
		return 1
	}
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	}
	return 0
}

// Uint returns an unsigned or non-negative signed integer scalar.
func (v Value) Uint() (uint64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.Int(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer scalar that fits in int64.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

// Float returns a floating-point scalar.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Str returns a string scalar.
func (v Value) Str() (string, bool) {
	s, ok := v.v.(string)
	return s, ok
}

// BoolValue returns a bool scalar.
func (v Value) BoolValue() (bool, bool) {
	b, ok := v.v.(bool)
	return b, ok
}

// Strings returns a string array.
func (v Value) Strings() ([]string, bool) {
	s, ok := v.v.([]string)
	return s, ok
}

// Ints returns an integer array of any integer element type as int64s.
func (v Value) Ints() ([]int64, bool) {
	switch a := v.v.(type) {
	case []uint8:
		return widen(a)
	case []int8:
		return widen(a)
	case []uint16:
		return widen(a)
	case []int16:
		return widen(a)
	case []uint32:
		return widen(a)
	case []int32:
		return widen(a)
	case []uint64:
		return widen(a)
	case []int64:
		return widen(a)
	}
	return nil, false
}

// integer is the integer element types a GGUF array can hold.
type integer interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | uint64 | int64
}

// widen converts integers to int64s; it fails on a uint64 above
// math.MaxInt64, the only element that can wrap negative.
func widen[T integer](a []T) ([]int64, bool) {
	out := make([]int64, len(a))
	for i, x := range a {
		if x > 0 && int64(x) < 0 {
			return nil, false
		}
		out[i] = int64(x)
	}
	return out, true
}

// Format renders the value for humans; long arrays are abbreviated.
func (v Value) Format(maxElems int) string {
	if v.typ != ValueArray {
		if s, ok := v.v.(string); ok {
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.v)
	}
	n := v.Len()
	if n <= maxElems {
		return fmt.Sprintf("%s[%d] %v", v.elem, n, v.v)
	}
	return fmt.Sprintf("%s[%d]", v.elem, n)
}

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}
