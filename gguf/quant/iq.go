package quant

// The i-quants (IQ1_S … IQ4_XS), the ternary types TQ1_0/TQ2_0, NVFP4 and
// the 1- and 2-bit types Q1_0/Q2_0.

var (
	dequantizeIQ1_S, dequantizeIQ1_M, dequantizeIQ2_XXS, dequantizeIQ2_XS, dequantizeIQ2_S dequantizeFunc
	dequantizeIQ3_XXS, dequantizeIQ3_S, dequantizeIQ4_NL, dequantizeIQ4_XS                 dequantizeFunc
	dequantizeTQ1_0, dequantizeTQ2_0, dequantizeNVFP4, dequantizeQ1_0, dequantizeQ2_0      dequantizeFunc
	quantizeRowIQ4_NL, quantizeRowIQ4_XS                                                   quantizeRowFunc
)
