package raid6

// syndromeBlock is what the one-pass syndrome kernel (genSyndrome, where
// the platform has one) computes per step: it computes the longest prefix
// of a row that is a multiple of it, and the library the rest.
const syndromeBlock = 128
