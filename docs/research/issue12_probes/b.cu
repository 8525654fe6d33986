#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
template<int U>__global__ void rd(const int4*__restrict__ p,size_t n,int*o){size_t s=(size_t)gridDim.x*blockDim.x,i=blockIdx.x*(size_t)blockDim.x+threadIdx.x;int a=0;
for(;i+(U-1)*s<n;i+=U*s){int4 v[U];
#pragma unroll
for(int u=0;u<U;u++)v[u]=__ldcs(p+i+u*s);
#pragma unroll
for(int u=0;u<U;u++)a^=v[u].x^v[u].w;}if(a==0x1234567)*o=a;}
__global__ void ch(const unsigned*p,int n,unsigned*o,long long*t){unsigned j=0;long long c=clock64();for(int k=0;k<n;k++)j=p[j];*t=clock64()-c;*o=j;}
typedef void(*K)(const int4*,size_t,int*);
int main(){size_t B=2ull<<30,n=B/16;int4*p,*q;int*o;cudaMalloc(&p,B);cudaMalloc(&q,B);cudaMalloc(&o,64);cudaMemset(p,1,B);
cudaEvent_t a,b;cudaEventCreate(&a);cudaEventCreate(&b);float ms;int sm;cudaDeviceGetAttribute(&sm,cudaDevAttrMultiProcessorCount,0);
cudaMemcpy(q,p,B,cudaMemcpyDeviceToDevice);cudaEventRecord(a);for(int r=0;r<10;r++)cudaMemcpy(q,p,B,cudaMemcpyDeviceToDevice);cudaEventRecord(b);cudaEventSynchronize(b);cudaEventElapsedTime(&ms,a,b);
printf("sms %d d2d copy of 2GiB: %.3f TB/s (bytes copied/s), %.3f TB/s (read+write)\n",sm,10*B/ms/1e9,20*B/ms/1e9);
K ks[4]={rd<1>,rd<2>,rd<4>,rd<8>};int us[4]={1,2,4,8};
for(int T:{128,256,512})for(int bps:{1,2,4,8})for(int k=0;k<4;k++){if(T*bps>2048)continue;int g=sm*bps;ks[k]<<<g,T>>>(p,n,o);cudaEventRecord(a);for(int r=0;r<5;r++)ks[k]<<<g,T>>>(p,n,o);cudaEventRecord(b);cudaEventSynchronize(b);cudaEventElapsedTime(&ms,a,b);
double bw=5*B/ms/1e9;long inflight=(long)bps*T*us[k]*16;printf("T %d blk/SM %d U %d inflight/SM %ld KiB read %.3f TB/s implied latency %.0f ns\n",T,bps,us[k],inflight/1024,bw,inflight*sm/(bw*1e12)*1e9);}
int M=1<<22;std::vector<unsigned>h(B/4,0),perm(M);for(int i=0;i<M;i++)perm[i]=i;std::shuffle(perm.begin(),perm.end(),std::mt19937(1));
for(int i=0;i<M;i++)h[(size_t)perm[i]*128]=perm[(i+1)%M]*128;cudaMemcpy(p,h.data(),B,cudaMemcpyHostToDevice);long long*t;cudaMalloc(&t,8);long long ht;int clk;cudaDeviceGetAttribute(&clk,cudaDevAttrClockRate,0);
for(int it=0;it<2;it++){ch<<<1,1>>>((unsigned*)p,20000,(unsigned*)o,t);cudaMemcpy(&ht,t,8,cudaMemcpyDeviceToHost);}
printf("pointer chase 2GiB random 512B-spaced: %.0f cycles/load = %.0f ns at %d MHz\n",ht/20000.,ht/20000./(clk/1e6)*1e3,clk/1000);
printf("%s\n",cudaGetErrorString(cudaGetLastError()));}
