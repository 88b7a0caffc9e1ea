package quant

// The legacy 32-element block types Q4_0, Q4_1, Q5_0 and Q5_1: reference
// and importance-weighted quantizers and dequantizers.

var (
	dequantizeQ4_0, dequantizeQ4_1, dequantizeQ5_0, dequantizeQ5_1     dequantizeFunc
	quantizeRowQ4_0, quantizeRowQ4_1, quantizeRowQ5_0, quantizeRowQ5_1 quantizeRowFunc
)
