package datapath

// CacheLine is the size every structure shared between PMDs is padded to.
const CacheLine = 64
