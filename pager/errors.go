package pager

import "errors"

var (
	// ErrInvalidSetting is returned by Manager.SetSettings for a value out of
	// range, and by Options.Validate; the wrapping error names the setting
	// (exp_pager_stime, exp_pager_initial_run_time, or the option) and says
	// what is allowed.
	ErrInvalidSetting = errors.New("pager: invalid setting")
	// ErrClosed is returned by a Manager's methods once it is closed.
	ErrClosed = errors.New("pager: closed")
)
