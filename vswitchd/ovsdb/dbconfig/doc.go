// Package dbconfig is the switch's configuration as the Open_vSwitch
// database's rows hold it, both ways: Wanted reads the configuration the
// rows ask for (with what the switch refuses of it, per row), ChangeOps
// writes a change of configuration as the operations on the rows and
// columns it touches. The daemon's reconciler reads with it, and so does
// vsctl, which runs its configuration commands as transactions on the
// database: both judge a row by the same code, so a command vsctl takes
// is one the daemon applies.
package dbconfig
