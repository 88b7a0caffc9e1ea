package quant

// The K-quants (256-element super-blocks): Q2_K … Q6_K with reference and
// importance-weighted quantizers, and Q8_K, the activation format.

var (
	dequantizeQ2_K, dequantizeQ3_K, dequantizeQ4_K, dequantizeQ5_K, dequantizeQ6_K, dequantizeQ8_K       dequantizeFunc
	quantizeRowQ2_K, quantizeRowQ3_K, quantizeRowQ4_K, quantizeRowQ5_K, quantizeRowQ6_K, quantizeRowQ8_K quantizeRowFunc
)
