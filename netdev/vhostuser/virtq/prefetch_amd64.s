#include "textflag.h"

// func prefetch(addrs *uintptr, n int)
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ addrs+0(FP), SI
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	MOVQ (SI), AX
	PREFETCHT0 (AX)
	ADDQ $8, SI
	DECQ CX
	JNZ loop
done:
	RET

// func prefetchW(addrs *uintptr, n int)
TEXT ·prefetchW(SB), NOSPLIT, $0-16
	MOVQ addrs+0(FP), SI
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE donew
loopw:
	MOVQ (SI), AX
	// PREFETCHW (AX): 0F 0D /1, which the Go assembler does not name.
	// CPUs without it (Intel before Broadwell) execute it as a NOP.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	ADDQ $8, SI
	DECQ CX
	JNZ loopw
donew:
	RET
