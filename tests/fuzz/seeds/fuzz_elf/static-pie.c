static int x = 1, y = 2;
int *table[] = {&x, &y};
int _start(void)
{
    return *table[0] + *table[1];
}
