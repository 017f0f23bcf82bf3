# Shell functions the bench scripts share; sourced after they cd to the
# repository's root (`. bench/lib.sh`).

# waitport waits up to 30 s for a listener on 127.0.0.1:$1.
waitport() {
	for _ in $(seq 1 300); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "port $1 never opened" >&2
	return 1
}
