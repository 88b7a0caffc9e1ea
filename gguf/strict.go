package gguf

import (
	"errors"
	"fmt"
	"strings"
)

// keyRule is the type llama.cpp's loader demands for a key it reads.
type keyRule struct {
	typ ValueType
	// elem is the array element type when typ is ValueArray.
	elem ValueType
	// orArray: the key may also be a per-layer array of i32 or u32
	// (llama_model_loader::get_key_or_arr).
	orArray bool
}

// generalKeyRules are keys outside any architecture prefix.
var generalKeyRules = map[string]keyRule{
	"general.architecture":                    {typ: ValueString},
	"general.alignment":                       {typ: ValueUint32},
	"general.file_type":                       {typ: ValueUint32},
	"general.quantization_version":            {typ: ValueUint32},
	"general.name":                            {typ: ValueString},
	KeySplitNo:                                {typ: ValueUint16},
	KeySplitCount:                             {typ: ValueUint16},
	KeySplitTensorsCount:                      {typ: ValueInt32},
	"tokenizer.ggml.model":                    {typ: ValueString},
	"tokenizer.ggml.pre":                      {typ: ValueString},
	"tokenizer.ggml.tokens":                   {typ: ValueArray, elem: ValueString},
	"tokenizer.ggml.token_type":               {typ: ValueArray, elem: ValueInt32},
	"tokenizer.ggml.scores":                   {typ: ValueArray, elem: ValueFloat32},
	"tokenizer.ggml.merges":                   {typ: ValueArray, elem: ValueString},
	"tokenizer.ggml.add_bos_token":            {typ: ValueBool},
	"tokenizer.ggml.add_eos_token":            {typ: ValueBool},
	"tokenizer.ggml.add_sep_token":            {typ: ValueBool},
	"tokenizer.ggml.add_space_prefix":         {typ: ValueBool},
	"tokenizer.ggml.remove_extra_whitespaces": {typ: ValueBool},
	"tokenizer.chat_template":                 {typ: ValueString},
}

// archKeyRules are keys under "<arch>." (src/llama-arch.cpp names, the
// types src/llama-model.cpp reads them as).
var archKeyRules = map[string]keyRule{
	"vocab_size":                           {typ: ValueUint32},
	"context_length":                       {typ: ValueUint32},
	"embedding_length":                     {typ: ValueUint32},
	"block_count":                          {typ: ValueUint32},
	"leading_dense_block_count":            {typ: ValueUint32},
	"feed_forward_length":                  {typ: ValueUint32, orArray: true},
	"expert_feed_forward_length":           {typ: ValueUint32, orArray: true},
	"expert_shared_feed_forward_length":    {typ: ValueUint32},
	"expert_count":                         {typ: ValueUint32},
	"expert_used_count":                    {typ: ValueUint32},
	"expert_shared_count":                  {typ: ValueUint32},
	"expert_group_count":                   {typ: ValueUint32},
	"expert_group_used_count":              {typ: ValueUint32},
	"expert_weights_scale":                 {typ: ValueFloat32},
	"expert_weights_norm":                  {typ: ValueBool},
	"expert_gating_func":                   {typ: ValueUint32},
	"nextn_predict_layers":                 {typ: ValueUint32},
	"attention.head_count":                 {typ: ValueUint32, orArray: true},
	"attention.head_count_kv":              {typ: ValueUint32, orArray: true},
	"attention.key_length":                 {typ: ValueUint32},
	"attention.value_length":               {typ: ValueUint32},
	"attention.key_length_mla":             {typ: ValueUint32},
	"attention.value_length_mla":           {typ: ValueUint32},
	"attention.layer_norm_epsilon":         {typ: ValueFloat32},
	"attention.layer_norm_rms_epsilon":     {typ: ValueFloat32},
	"attention.q_lora_rank":                {typ: ValueUint32},
	"attention.kv_lora_rank":               {typ: ValueUint32},
	"attention.sliding_window":             {typ: ValueUint32},
	"attention.sliding_window_pattern":     {typ: ValueUint32, orArray: true},
	"rope.dimension_count":                 {typ: ValueUint32},
	"rope.freq_base":                       {typ: ValueFloat32},
	"rope.freq_base_swa":                   {typ: ValueFloat32},
	"rope.scaling.type":                    {typ: ValueString},
	"rope.scaling.factor":                  {typ: ValueFloat32},
	"rope.scaling.attn_factor":             {typ: ValueFloat32},
	"rope.scaling.original_context_length": {typ: ValueUint32},
	"rope.scaling.yarn_log_multiplier":     {typ: ValueFloat32},
}

func (r keyRule) String() string {
	s := r.typ.String()
	if r.typ == ValueArray {
		s = fmt.Sprintf("arr[%s]", r.elem)
	}
	if r.orArray {
		s += " or arr[i32|u32]"
	}
	return s
}

func (r keyRule) accepts(v Value) bool {
	if v.Type() == r.typ && (r.typ != ValueArray || v.ElemType() == r.elem) {
		return true
	}
	return r.orArray && v.Type() == ValueArray && (v.ElemType() == ValueInt32 || v.ElemType() == ValueUint32)
}

// ruleFor finds the rule for key in a file of architecture arch.
func ruleFor(key, arch string) (keyRule, bool) {
	if r, ok := generalKeyRules[key]; ok {
		return r, true
	}
	if strings.HasPrefix(key, "tokenizer.ggml.") && strings.HasSuffix(key, "_token_id") {
		return keyRule{typ: ValueUint32}, true
	}
	if arch != "" && strings.HasPrefix(key, arch+".") {
		r, ok := archKeyRules[key[len(arch)+1:]]
		return r, ok
	}
	return keyRule{}, false
}

// CheckStrict reports everything in f that llama.cpp's loader would
// refuse although a tolerant reader accepts it: data not laid out in
// tensor-info order with exactly the padding between tensors, unaligned
// data, a missing padding tail, over-long tensor names, and metadata keys
// llama.cpp reads stored with another type. It returns nil for a file
// llama.cpp's GGUF layer accepts, or every finding joined.
func (f *File) CheckStrict() error {
	var errs []error
	add := func(off int64, format string, args ...any) {
		errs = append(errs, &FormatError{File: f.Name, Offset: off, Msg: "strict: " + fmt.Sprintf(format, args...)})
	}
	arch := f.Architecture()
	for _, kv := range f.KVs {
		if r, ok := ruleFor(kv.Key, arch); ok && !r.accepts(kv.Value) {
			add(0, "key %q has type %s; llama.cpp requires %s", kv.Key, typeDesc(kv.Value), r)
		}
	}
	var want int64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if len(t.Name) > MaxTensorName {
			add(f.DataOffset+t.Offset, "tensor name %q is %d bytes; ggml allows %d", t.Name, len(t.Name), MaxTensorName)
		}
		if t.Offset != want {
			add(f.DataOffset+t.Offset, "tensor %q has data offset %d; llama.cpp requires %d (data in tensor order, padded to %d, no holes)",
				t.Name, t.Offset, want, f.Alignment)
			want = t.Offset
		}
		want += padTo(t.Bytes(), f.Alignment)
	}
	if len(f.Tensors) > 0 && f.DataOffset+want > f.Size {
		add(f.Size, "file ends %d bytes before the padded end of the data section (%d)", f.DataOffset+want-f.Size, f.DataOffset+want)
	}
	return errors.Join(errs...)
}

func typeDesc(v Value) string {
	if v.Type() == ValueArray {
		return fmt.Sprintf("arr[%s]", v.ElemType())
	}
	return v.Type().String()
}
