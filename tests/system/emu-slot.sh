# Sourced by the emulator runners: hold one of two machine-wide emulator slots
# (the machine has 2 cores; never run more than two emulators at once).
exec 9>/tmp/ptvisor-emu-slot-0.lock
if ! flock -n 9; then
    exec 9>/tmp/ptvisor-emu-slot-1.lock
    if ! flock -n 9; then
        exec 9>/tmp/ptvisor-emu-slot-0.lock
        flock 9
    fi
fi
