package report

// What the tests outside the package (package report_test: those that
// import packages that import report) read of this package's test
// records.
var (
	GoldenRaw        = goldenRaw
	SampleRaw        = sampleRaw
	SampleKubernetes = sampleKubernetes
	EveryKindOfLine  = everyKindOfLine
)
