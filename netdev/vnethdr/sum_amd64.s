#include "textflag.h"

// func sumAVX2(p *byte, n int, out *[8]uint32)
// Four accumulators: Y0/Y1 take the low/high 16-bit halves of the dwords
// of the first 32 bytes of each 64, Y2/Y3 those of the second 32.
TEXT ·sumAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ out+16(FP), DI
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPCMPEQD Y7, Y7, Y7
	VPSRLD $16, Y7, Y7 // 0x0000ffff in every lane
	SHRQ $6, CX
	JZ done
loop:
	VMOVDQU 0(SI), Y4
	VMOVDQU 32(SI), Y5
	VPAND Y7, Y4, Y6
	VPSRLD $16, Y4, Y4
	VPADDD Y6, Y0, Y0
	VPADDD Y4, Y1, Y1
	VPAND Y7, Y5, Y6
	VPSRLD $16, Y5, Y5
	VPADDD Y6, Y2, Y2
	VPADDD Y5, Y3, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ loop
done:
	VPADDD Y1, Y0, Y0
	VPADDD Y3, Y2, Y2
	VPADDD Y2, Y0, Y0
	VMOVDQU Y0, 0(DI)
	VZEROUPPER
	RET
